package sops

import "errors"

// Shamir's secret sharing as sops uses it (its shamir package, itself from
// HashiCorp Vault): each byte of the secret is the constant term of a
// random polynomial over GF(2^8) reduced by x^8+x^4+x^3+x+1 (0x11B, AES's
// field); share i holds the polynomial's value at x = i+1 for every byte,
// followed by that x as its last byte.

// gfMul multiplies in GF(2^8) modulo 0x11B.
func gfMul(a, b byte) byte {
	var p byte
	for b != 0 {
		if b&1 != 0 {
			p ^= a
		}
		hi := a & 0x80
		a <<= 1
		if hi != 0 {
			a ^= 0x1B
		}
		b >>= 1
	}
	return p
}

// gfInv is a's multiplicative inverse (a^254); a must not be zero.
func gfInv(a byte) byte {
	r := byte(1)
	for range 254 {
		r = gfMul(r, a)
	}
	return r
}

// shamirCombine recovers the secret from shares (each the secret's length
// plus the x byte), by Lagrange interpolation at 0. Every share is used:
// the shares of one split all lie on the same polynomials, so more than
// the threshold give the same secret.
func shamirCombine(shares [][]byte) ([]byte, error) {
	if len(shares) < 2 {
		return nil, errors.New("fewer than two shares")
	}
	n := len(shares[0])
	if n < 2 {
		return nil, errors.New("a share is too short")
	}
	xs := make([]byte, len(shares))
	seen := map[byte]bool{}
	for i, s := range shares {
		if len(s) != n {
			return nil, errors.New("shares of different lengths")
		}
		x := s[n-1]
		if x == 0 || seen[x] {
			return nil, errors.New("a share's x coordinate is zero or repeated")
		}
		seen[x] = true
		xs[i] = x
	}
	// basis[i] = prod_{j != i} x_j / (x_i - x_j), the Lagrange basis at 0
	// (subtraction is XOR in GF(2^8)).
	basis := make([]byte, len(shares))
	for i := range shares {
		b := byte(1)
		for j := range shares {
			if i != j {
				b = gfMul(b, gfMul(xs[j], gfInv(xs[i]^xs[j])))
			}
		}
		basis[i] = b
	}
	secret := make([]byte, n-1)
	for k := range secret {
		var v byte
		for i, s := range shares {
			v ^= gfMul(s[k], basis[i])
		}
		secret[k] = v
	}
	return secret, nil
}
