object 01b031a061d07ed29f5db256317eec331f972299
type commit
tag v-pgp-good
tagger Test <test@example.com> 1700000000 +0000

release v-pgp-good
-----BEGIN PGP SIGNATURE-----

iHUEABYIAB0WIQT+wGFj22EOgzSM64wThApsWTvR8gUCZVPxAAAKCRAThApsWTvR
8vjhAP4zlXEigwF8rWeLKgFPjDQxHqqQjtlmAZMJ9XQZFNs7NgD9EPmBkCwS7wBf
IdtSKB9I/SbWsRm6j74OxSxpD6o7Kgg=
=k5dq
-----END PGP SIGNATURE-----
