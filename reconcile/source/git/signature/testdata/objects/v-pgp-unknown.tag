object f94d125566e4efa8f32f0d36b1728fb0b029a214
type commit
tag v-pgp-unknown
tagger Test <test@example.com> 1700000000 +0000

release v-pgp-unknown
-----BEGIN PGP SIGNATURE-----

iHUEABYIAB0WIQQllahf8TpEWuLeK4ZxO6UiceTsBwUCZVPxAAAKCRBxO6UiceTs
Bz+qAP4gMKP4QRkKWpYF3VJWTHkhM7h7krJnk0aGM5JynHRwVQEAgVxblM+NGKy4
Gar3dLeSWQV5mA2RUC93spMMGjAg/Qc=
=sK8X
-----END PGP SIGNATURE-----
