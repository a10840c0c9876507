package source

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"text/template"
	"time"

	"github.com/Masterminds/sprig/v3"
)

// The random functions of a chart's templates (Sprig's) draw from a
// stream that is a function of the instance's seed, the function, its
// arguments and how many calls with the same arguments came before it in
// the render: the same commit renders the same values in every process (a
// restart, a standby that takes over), a password a chart generates stays
// the same when other templates change, and nobody without the seed can
// predict it. `now` is the commit's time.
//
// ErrNoSeed is what they fail with when the render has no seed.
var ErrNoSeed = errors.New("random template functions need the instance's seed")

// repeatableFuncs returns the overrides of the time and random functions.
func repeatableFuncs(seed []byte, now time.Time) template.FuncMap {
	r := &repeatable{seed: seed, calls: map[string]int{}}
	const (
		alpha   = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		digits  = "0123456789"
		ascii   = " !\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~"
		maxRand = 1 << 20
	)
	chars := func(name, set string) func(int) (string, error) {
		return func(n int) (string, error) {
			if n < 0 || n > maxRand {
				return "", fmt.Errorf("%s %d: count out of range", name, n)
			}
			g, err := r.stream(name, n)
			if err != nil {
				return "", err
			}
			var sb strings.Builder
			for range n {
				sb.WriteByte(set[g.IntN(len(set))])
			}
			return sb.String(), nil
		}
	}
	return template.FuncMap{
		"now":          func() time.Time { return now },
		"randAlphaNum": chars("randAlphaNum", alpha+digits),
		"randAlpha":    chars("randAlpha", alpha),
		"randNumeric":  chars("randNumeric", digits),
		"randAscii":    chars("randAscii", ascii),
		"randBytes": func(n int) (string, error) {
			if n < 0 || n > maxRand {
				return "", fmt.Errorf("randBytes %d: count out of range", n)
			}
			g, err := r.stream("randBytes", n)
			if err != nil {
				return "", err
			}
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(g.Uint32())
			}
			return base64.StdEncoding.EncodeToString(b), nil
		},
		"randInt": func(lo, hi int) (int, error) {
			if hi <= lo {
				return 0, fmt.Errorf("randInt %d %d: empty range", lo, hi)
			}
			g, err := r.stream("randInt", lo, hi)
			if err != nil {
				return 0, err
			}
			return lo + g.IntN(hi-lo), nil
		},
		"uuidv4": func() (string, error) {
			g, err := r.stream("uuidv4")
			if err != nil {
				return "", err
			}
			var u [16]byte
			binary.BigEndian.PutUint64(u[:8], g.Uint64())
			binary.BigEndian.PutUint64(u[8:], g.Uint64())
			u[6] = u[6]&0x0f | 0x40 // version 4
			u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
			return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:]), nil
		},
		"shuffle": func(s string) (string, error) {
			g, err := r.stream("shuffle", s)
			if err != nil {
				return "", err
			}
			rs := []rune(s)
			g.Shuffle(len(rs), func(i, j int) { rs[i], rs[j] = rs[j], rs[i] })
			return string(rs), nil
		},
	}
}

// repeatable hands out the random streams of one render.
type repeatable struct {
	seed  []byte
	mu    sync.Mutex
	calls map[string]int // calls so far, by function and arguments
}

// stream is the generator of the next call of fn with args: keyed by the
// seed, fn, args and the number of such calls before it.
func (r *repeatable) stream(fn string, args ...any) (*rand.Rand, error) {
	if len(r.seed) == 0 {
		return nil, fmt.Errorf("%s: %w", fn, ErrNoSeed)
	}
	key := fmt.Sprintf("%s\x00%q", fn, args)
	r.mu.Lock()
	n := r.calls[key]
	r.calls[key] = n + 1
	r.mu.Unlock()
	mac := hmac.New(sha256.New, r.seed)
	fmt.Fprintf(mac, "%s\x00%d", key, n)
	var s [32]byte
	copy(s[:], mac.Sum(nil))
	return rand.New(rand.NewChaCha8(s)), nil
}

// generatedOnceNames are the functions whose output cannot be repeated
// safely: keys and certificates (a fresh key, a serial, the time), and
// hashes and ciphers with a random salt or IV.
var generatedOnceNames = []string{
	"genPrivateKey", "genCA", "genCAWithKey", "genSelfSignedCert", "genSelfSignedCertWithKey",
	"genSignedCert", "genSignedCertWithKey", "bcrypt", "htpasswd", "encryptAES",
}

// generatedOnceFuncs are Sprig's functions of generatedOnceNames, each
// counting its calls in n. With stand-ins, they return instead values of
// the same types whose strings differ at every call, at no cost (a key
// takes tens of milliseconds): enough to tell which objects they reach.
func generatedOnceFuncs(n *atomic.Int64, standIns bool) template.FuncMap {
	all := sprig.TxtFuncMap()
	fm := template.FuncMap{}
	for _, name := range generatedOnceNames {
		fn, ok := all[name]
		if !ok {
			continue
		}
		v := reflect.ValueOf(fn)
		fm[name] = reflect.MakeFunc(v.Type(), func(args []reflect.Value) []reflect.Value {
			call := n.Add(1)
			if standIns {
				return standIn(v.Type(), fmt.Sprintf("recond-stand-in-%s-%d", name, call))
			}
			if v.Type().IsVariadic() {
				return v.CallSlice(args)
			}
			return v.Call(args)
		}).Interface()
	}
	return fm
}

// standIn returns zero values of ft's results, with every string (and
// every exported string field of a struct) set to s.
func standIn(ft reflect.Type, s string) []reflect.Value {
	out := make([]reflect.Value, ft.NumOut())
	for i := range out {
		t := ft.Out(i)
		v := reflect.New(t).Elem()
		switch t.Kind() {
		case reflect.String:
			v.SetString(s)
		case reflect.Struct:
			for f := range t.NumField() {
				if fv := v.Field(f); fv.Kind() == reflect.String && fv.CanSet() {
					fv.SetString(s + "-" + t.Field(f).Name)
				}
			}
		}
		out[i] = v
	}
	return out
}
