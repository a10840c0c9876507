#!/usr/bin/env bash
# Makes, with the real git, gpg and ssh-keygen, the signed commits and tags
# package signature's tests verify (and the end-to-end tests of package
# source fetch), and the public keys they are checked against:
#
#   keys/pgp-*.asc       OpenPGP public keys (gpg, Ed25519): trusted, stranger,
#                        and expired (valid for one day in September 2023)
#   keys/ssh-*.pub       SSH public keys (ssh-keygen, Ed25519): trusted,
#                        stranger, expiring and files
#   keys/allowed_signers the SSH keys trusted to sign: trusted; expiring only
#                        before 2023-11-01 (line 3); files only for namespace
#                        "file" (line 4)
#   keys/trusted         a --trusted-keys-file: allowed_signers, then the
#                        trusted and the expired OpenPGP keys
#   tree/cm.yaml         the one file of every commit's tree
#   objects/NAME.commit  commits as `git cat-file commit` prints them: no
#   objects/NAME.tag     parent, one tree; tags as `git cat-file tag` does
#
# Every commit and tag is made by `git commit-tree -S` or `git tag -s`
# (gpg.format=ssh for the SSH ones), at 2023-11-14T22:13:20Z unless its name
# says otherwise. The forged commits carry the signature of the good one over
# another message; ssh-namespace-file is the unsigned commit signed by the
# trusted key for namespace "file" instead of "git". gpg runs with a faked,
# frozen clock, so that the keys' dates are fixed. Keys are new at every run:
# commit what changes together.
#
#   testdata/generate.sh
set -euo pipefail
shopt -s inherit_errexit
here=$(cd "$(dirname "$0")" && pwd)
for bin in git gpg gpgconf ssh-keygen; do
  command -v "$bin" >/dev/null || { echo "generate.sh: $bin is not installed" >&2; exit 1; }
done

work=$(mktemp -d)
export GNUPGHOME=$work/gnupg
mkdir -m 700 "$GNUPGHOME"
cleanup() {
  gpgconf --kill gpg-agent 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

export HOME=$work/home GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
export GIT_AUTHOR_NAME=Test GIT_AUTHOR_EMAIL=test@example.com
export GIT_COMMITTER_NAME=Test GIT_COMMITTER_EMAIL=test@example.com
mkdir "$HOME"

keytime=1695988800 # 2023-09-29T12:00:00Z: every OpenPGP key is made then
oct1=1696161600    # 2023-10-01T12:00:00Z: inside the expiring SSH key's window
nov14=1700000000   # 2023-11-14T22:13:20Z: after it

# gpg at a frozen time, for git's gpg.program: SIGN_TIME is the time.
cat >"$work/gpg-at" <<'EOF'
#!/bin/sh
exec gpg --batch --pinentry-mode loopback --passphrase '' --faked-system-time "$SIGN_TIME!" "$@"
EOF
chmod +x "$work/gpg-at"

# pgp_key NAME EXPIRY: makes an OpenPGP key at keytime and prints its
# fingerprint.
pgp_key() {
  if ! SIGN_TIME=$keytime "$work/gpg-at" --quiet --quick-gen-key "${1^} <$1@example.com>" ed25519 sign "$2" 2>"$work/gpg.log"; then
    cat "$work/gpg.log" >&2
    return 1
  fi
  gpg --batch --with-colons --list-keys "<$1@example.com>" 2>>"$work/gpg.log" | awk -F: '$1 == "fpr" {print $10; exit}'
}

# ssh_key NAME: makes an SSH key in $work.
ssh_key() {
  ssh-keygen -q -t ed25519 -N '' -C "$1@example.com" -f "$work/ssh-$1"
}

repo=$work/repo
git init -q "$repo"
g() { git -C "$repo" "$@"; }
# at TIME CMD...: CMD with TIME as the author, committer and tagger date.
at() {
  local when=$1
  shift
  GIT_AUTHOR_DATE="@$when +0000" GIT_COMMITTER_DATE="@$when +0000" SIGN_TIME=$when "$@"
}
pgp_sign() { g -c gpg.program="$work/gpg-at" -c user.signingkey="$1" "${@:2}"; }
ssh_sign() { g -c gpg.format=ssh -c user.signingkey="$work/ssh-$1" "${@:2}"; }

# The tree every commit has.
printf 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: signed\n' >"$repo/cm.yaml"
g add cm.yaml
tree=$(g write-tree)

# forge SHA: a copy of commit SHA, its signature kept, over another message.
forge() {
  local raw
  raw=$(g cat-file commit "$1")
  printf '%s\n\n%s\n' "${raw%%$'\n\n'*}" "not what was signed" | g hash-object -t commit -w --stdin
}

# with_signature SHA SIGFILE: a copy of the unsigned commit SHA with the
# armored signature of SIGFILE as its gpgsig header, as git writes one.
with_signature() {
  local raw
  raw=$(g cat-file commit "$1")
  {
    printf '%s\ngpgsig ' "${raw%%$'\n\n'*}"
    sed '2,$s/^/ /' "$2"
    printf '\n%s\n' "${raw#*$'\n\n'}"
  } | g hash-object -t commit -w --stdin
}

declare -A commits
commit() { # NAME TIME [SIGN...]: commits NAME at TIME, signed by SIGN (pgp_sign FPR or ssh_sign NAME)
  local name=$1 when=$2
  shift 2
  if [[ $# -eq 0 ]]; then
    commits[$name]=$(at "$when" g commit-tree -m "$name" "$tree")
  else
    commits[$name]=$(at "$when" "$@" commit-tree -S -m "$name" "$tree")
  fi
}
tag() { # NAME COMMIT TIME [SIGN...]: an annotated tag, signed by SIGN
  local name=$1 sha=${commits[$2]} when=$3
  shift 3
  if [[ $# -eq 0 ]]; then
    at "$when" g tag -a -m "release $name" "$name" "$sha"
  else
    at "$when" "$@" tag -s -m "release $name" "$name" "$sha"
  fi
}

trusted=$(pgp_key trusted never)
stranger=$(pgp_key stranger never)
expired=$(pgp_key expired 1d)
for k in trusted stranger expiring files; do ssh_key "$k"; done

commit unsigned "$nov14"
commit pgp-good "$nov14" pgp_sign "$trusted"
commit pgp-unknown "$nov14" pgp_sign "$stranger"
commit pgp-expired $((keytime + 3600)) pgp_sign "$expired"
commits[pgp-forged]=$(forge "${commits[pgp-good]}")
commit ssh-good "$nov14" ssh_sign trusted
commit ssh-unknown "$nov14" ssh_sign stranger
commit ssh-expired "$nov14" ssh_sign expiring
commit ssh-in-window "$oct1" ssh_sign expiring
commit ssh-wrong-namespaces "$nov14" ssh_sign files
commits[ssh-forged]=$(forge "${commits[ssh-good]}")
g cat-file commit "${commits[unsigned]}" >"$work/payload"
ssh-keygen -q -Y sign -n file -f "$work/ssh-trusted" "$work/payload"
commits[ssh-namespace-file]=$(with_signature "${commits[unsigned]}" "$work/payload.sig")

# A tag's own signature counts, not its commit's; its date is the tagger's.
tag v-unsigned pgp-good "$nov14"
tag v-pgp-good unsigned "$nov14" pgp_sign "$trusted"
tag v-pgp-unknown pgp-good "$nov14" pgp_sign "$stranger"
tag v-ssh-good unsigned "$nov14" ssh_sign trusted
tag v-ssh-unknown ssh-good "$nov14" ssh_sign stranger
tag v-ssh-expired ssh-in-window "$nov14" ssh_sign expiring
tag v-ssh-in-window ssh-expired "$oct1" ssh_sign expiring

rm -rf "$here/keys" "$here/tree" "$here/objects"
mkdir -p "$here/keys" "$here/tree" "$here/objects"
cp "$repo/cm.yaml" "$here/tree/cm.yaml"
for name in "${!commits[@]}"; do
  g cat-file commit "${commits[$name]}" >"$here/objects/$name.commit"
done
for name in $(g tag --list); do
  g cat-file tag "$name" >"$here/objects/$name.tag"
done
for k in trusted stranger expired; do
  gpg --batch --armor --export "<$k@example.com>" >"$here/keys/pgp-$k.asc"
done
line() { cut -d' ' -f1,2 "$work/ssh-$1.pub"; }
for k in trusted stranger expiring files; do
  line "$k" >"$here/keys/ssh-$k.pub"
done
{
  echo "# SSH keys trusted to sign commits"
  echo "trusted@example.com $(line trusted)"
  echo "expiring@example.com valid-before=\"20231101Z\" $(line expiring)"
  echo "files@example.com namespaces=\"file\" $(line files)"
} >"$here/keys/allowed_signers"
{
  cat "$here/keys/allowed_signers"
  echo
  cat "$here/keys/pgp-trusted.asc" "$here/keys/pgp-expired.asc"
} >"$here/keys/trusted"
echo "generate.sh: $(ls "$here/objects" | wc -l) objects and $(ls "$here/keys" | wc -l) key files in $here" >&2
