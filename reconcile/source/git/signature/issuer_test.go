package signature

import "testing"

// What is not an armored OpenPGP signature names no key. (The key ids of
// the signatures gpg made are checked by TestVerify.)
func TestIssuerUnreadable(t *testing.T) {
	for _, bad := range []string{"", "garbage", "-----BEGIN SSH SIGNATURE-----\nAAAA\n-----END SSH SIGNATURE-----\n"} {
		if got := issuer(bad); got != "" {
			t.Errorf("issuer(%q) = %q, want \"\"", bad, got)
		}
	}
}
