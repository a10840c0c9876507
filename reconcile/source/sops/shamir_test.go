package sops

import (
	"bytes"
	"crypto/rand"
	"testing"
)

func TestGF(t *testing.T) {
	// FIPS 197, 4.2: {57}·{83} = {c1}, {57}·{13} = {fe}.
	if got := gfMul(0x57, 0x83); got != 0xc1 {
		t.Errorf("57·83 = %02x, want c1", got)
	}
	if got := gfMul(0x57, 0x13); got != 0xfe {
		t.Errorf("57·13 = %02x, want fe", got)
	}
	for a := 1; a < 256; a++ {
		if got := gfMul(byte(a), gfInv(byte(a))); got != 1 {
			t.Fatalf("%02x · inverse = %02x", a, got)
		}
	}
}

// split is Shamir's split as sops does it: share i is the value at x=i+1
// of a random polynomial per byte, with x as its last byte.
func split(t *testing.T, secret []byte, n, threshold int) [][]byte {
	t.Helper()
	shares := make([][]byte, n)
	for i := range shares {
		shares[i] = make([]byte, len(secret)+1)
		shares[i][len(secret)] = byte(i + 1)
	}
	coef := make([]byte, threshold)
	for k, s := range secret {
		if _, err := rand.Read(coef[1:]); err != nil {
			t.Fatal(err)
		}
		coef[0] = s
		for i := range shares {
			x, y := byte(i+1), byte(0)
			for j := threshold - 1; j >= 0; j-- {
				y = gfMul(y, x) ^ coef[j]
			}
			shares[i][k] = y
		}
	}
	return shares
}

func TestShamirCombine(t *testing.T) {
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		t.Fatal(err)
	}
	shares := split(t, secret, 5, 3)
	for _, set := range [][]int{{0, 1, 2}, {4, 2, 0}, {1, 3, 4}, {0, 1, 2, 3, 4}} {
		var sub [][]byte
		for _, i := range set {
			sub = append(sub, shares[i])
		}
		got, err := shamirCombine(sub)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, secret) {
			t.Errorf("shares %v: wrong secret", set)
		}
	}
	if got, _ := shamirCombine(shares[:2]); bytes.Equal(got, secret) {
		t.Error("two shares of a threshold of three gave the secret")
	}
	for name, bad := range map[string][][]byte{
		"one share":  shares[:1],
		"repeated x": {shares[0], shares[0]},
		"lengths":    {shares[0], shares[1][:10]},
		"x zero":     {append(bytes.Clone(shares[0][:32]), 0), shares[1]},
		"too short":  {{1}, {2}},
	} {
		if _, err := shamirCombine(bad); err == nil {
			t.Errorf("%s: combined", name)
		}
	}
}
