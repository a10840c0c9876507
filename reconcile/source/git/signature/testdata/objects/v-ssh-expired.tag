object f0faa38de1d80affffc54031234999bcc0afc4ca
type commit
tag v-ssh-expired
tagger Test <test@example.com> 1700000000 +0000

release v-ssh-expired
-----BEGIN SSH SIGNATURE-----
U1NIU0lHAAAAAQAAADMAAAALc3NoLWVkMjU1MTkAAAAg7aRski2oLB9+nOjEw7qnevuwwf
CuFmWR4alyGGnnJpoAAAADZ2l0AAAAAAAAAAZzaGE1MTIAAABTAAAAC3NzaC1lZDI1NTE5
AAAAQC+6AJSkUpDtN/mP6El8LJTs9duk85svv8zvdp9QBY0YABq9+p0JXeAyDDikOC/ft6
mFL/fWA2DwaYSe1lbo1w8=
-----END SSH SIGNATURE-----
