package helm

import (
	"bytes"
	"crypto/hmac"
	crand "crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/pem"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/template"
	"time"

	"github.com/Masterminds/sprig/v3"
	"helm.sh/helm/v4/pkg/chart/loader/archive"

	"recond.dev/recond/reconcile/source/chartspec"
)

// The random functions of a chart's templates (Sprig's) draw from a
// stream that is a function of the instance's seed, the function, its
// arguments and how many calls with the same arguments came before it in
// the render: the same commit renders the same values in every process (a
// restart, a standby that takes over), a password a chart generates stays
// the same when other templates change, and nobody without the seed can
// predict it. `now` is the commit's time, and so is the time the other
// time functions measure to or fall back on (`ago`, `durationRound`,
// `date` and its kin given no time); the local time zone is UTC (`date`,
// `htmlDate`, `toDate`, a zone "Local"). `keys` and `values` list a
// map's keys in sorted order, and its values in that order (Sprig lists
// them in Go's random map order).
//
// ErrNoSeed is what they fail with when the render has no seed.
var ErrNoSeed = chartspec.ErrNoSeed

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
	fm := template.FuncMap{
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
	maps.Copy(fm, orderedFuncs())
	maps.Copy(fm, timeFuncs(now))
	return fm
}

// orderedFuncs are Sprig's functions that list a map, in sorted order:
// `keys` (each map's keys sorted, the maps in the order given, as Sprig
// concatenates them) and `values` (in the order of the sorted keys).
func orderedFuncs() template.FuncMap {
	return template.FuncMap{
		"keys": func(dicts ...map[string]any) []string {
			k := []string{}
			for _, d := range dicts {
				k = append(k, slices.Sorted(maps.Keys(d))...)
			}
			return k
		},
		"values": func(d map[string]any) []any {
			v := []any{}
			for _, k := range slices.Sorted(maps.Keys(d)) {
				v = append(v, d[k])
			}
			return v
		},
	}
}

// timeFuncs are Sprig's time functions that would read the clock or the
// process's time zone, measured to now (the commit's time) and in UTC.
func timeFuncs(now time.Time) template.FuncMap {
	sp := sprig.TxtFuncMap()
	dateInZone, _ := sp["dateInZone"].(func(string, any, string) string)
	durationRound, _ := sp["durationRound"].(func(any) string)
	if dateInZone == nil || durationRound == nil {
		panic("sprig: dateInZone or durationRound changed its signature") // a test renders each of them
	}
	// at is a date argument as Sprig reads one, now when it is no time.
	at := func(d any) any {
		switch d.(type) {
		case time.Time, *time.Time, int64, int, int32:
			return d
		}
		return now
	}
	zone := func(z string) string {
		if z == "Local" {
			return "UTC"
		}
		return z
	}
	inZone := func(f string, d any, z string) string { return dateInZone(f, at(d), zone(z)) }
	toDate := func(f, s string) (time.Time, error) { return time.ParseInLocation(f, s, time.UTC) }
	return template.FuncMap{
		"date":           func(f string, d any) string { return inZone(f, d, "UTC") },
		"dateInZone":     inZone,
		"date_in_zone":   inZone,
		"htmlDate":       func(d any) string { return inZone("2006-01-02", d, "UTC") },
		"htmlDateInZone": func(d any, z string) string { return inZone("2006-01-02", d, z) },
		"toDate": func(f, s string) time.Time {
			t, _ := toDate(f, s)
			return t
		},
		"mustToDate": toDate,
		"ago": func(d any) string {
			t := now
			switch d := d.(type) {
			case time.Time:
				t = d
			case int64:
				t = time.Unix(d, 0)
			case int:
				t = time.Unix(int64(d), 0)
			}
			return now.Sub(t).Round(time.Second).String()
		},
		"durationRound": func(d any) string {
			if t, ok := d.(time.Time); ok {
				return durationRound(int64(now.Sub(t)))
			}
			return durationRound(d)
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

// generatedCalls counts the calls of the generated-once functions of a
// render, and calls onFirst (when set) at the first.
type generatedCalls struct {
	n       atomic.Int64
	onFirst func()
}

func (g *generatedCalls) add() {
	if g.n.Add(1) == 1 && g.onFirst != nil {
		g.onFirst()
	}
}

// generatedOnceFuncs are Sprig's functions of generatedOnceNames, each
// counting its calls in n. With stand-ins, they return instead values of
// the same types whose strings differ at every call, at no cost (a key
// takes tens of milliseconds): enough to tell which objects they reach.
// A stand-in is named by its function, its arguments and the calls with
// the same arguments before it, never by its place among the other calls:
// what a stand-in reaches is a function of the ordinary inputs alone
// (helmgenerated.go), which a call added elsewhere in the chart does not
// change. Without stand-ins, the certificate makers that make their own
// RSA key take it from keys (when not nil): the same key, made ahead.
func generatedOnceFuncs(n *generatedCalls, standIns bool, keys *keyPool) template.FuncMap {
	all := sprig.TxtFuncMap()
	fm := template.FuncMap{}
	var (
		mu    sync.Mutex
		calls = map[string]int{}
	)
	for _, name := range generatedOnceNames {
		fn, ok := all[name]
		if !ok {
			continue
		}
		v := reflect.ValueOf(fn)
		var withKey reflect.Value
		if w, ok := all[name+"WithKey"]; ok && keys != nil && slices.Contains(keyMakers, name) {
			withKey = reflect.ValueOf(w)
			if wt, ft := withKey.Type(), v.Type(); wt.NumIn() != ft.NumIn()+1 || wt.In(ft.NumIn()).Kind() != reflect.String || wt.IsVariadic() || ft.IsVariadic() {
				panic("sprig: " + name + "WithKey changed its signature") // a test renders each of them
			}
		}
		fm[name] = reflect.MakeFunc(v.Type(), func(args []reflect.Value) []reflect.Value {
			n.add()
			if standIns {
				h := sha256.New()
				for _, a := range args {
					fmt.Fprintf(h, "%q\x00", a.Interface())
				}
				key := fmt.Sprintf("%s-%x", name, h.Sum(nil)[:8])
				mu.Lock()
				calls[key]++
				call := calls[key]
				mu.Unlock()
				return standIn(v.Type(), fmt.Sprintf("recond-stand-in-%s-%d", key, call))
			}
			if withKey.IsValid() {
				if key, err := keys.take(name); err == nil {
					return withKey.Call(append(slices.Clone(args), reflect.ValueOf(key)))
				}
				// Made here instead, with the error it has then.
			}
			if v.Type().IsVariadic() {
				return v.CallSlice(args)
			}
			return v.Call(args)
		}).Interface()
	}
	return fm
}

// keyMakers are the certificate makers that make an RSA key of keyBits
// of their own, each with a <name>WithKey that takes it as PEM instead.
var keyMakers = []string{"genCA", "genSelfSignedCert", "genSignedCert"}

// keyBits is the size of the RSA keys Sprig's certificate makers make.
const keyBits = 2048

// callsSigned reports whether a chart's templates (its own and its
// subcharts') call genSignedCert, as text.
func callsSigned(files []*archive.BufferedFile) bool {
	for _, f := range files {
		if !isTemplate(f.Name) {
			continue
		}
		for rest := f.Data; ; {
			i := bytes.Index(rest, []byte("genSignedCert"))
			if i < 0 {
				break
			}
			if rest = rest[i+len("genSignedCert"):]; !bytes.HasPrefix(rest, []byte("WithKey")) {
				return true
			}
		}
	}
	return false
}

// keyPool hands out the RSA keys of a render's certificate makers. A key
// takes tens of milliseconds, and a CA is made to sign: when genCA is
// called in a chart whose templates call genSignedCert, the key of the
// certificate it is about to sign is made on another core, beside the
// CA's own, and the next certificate maker takes it. Each key is made by
// crypto/rsa from the system's randomness, as the maker would make it,
// and handed out once.
type keyPool struct {
	signed bool // the templates call genSignedCert

	mu    sync.Mutex
	ahead chan madeKey // a key made ahead, or being made
}

type madeKey struct {
	pem string
	err error
}

// take returns a new key for the certificate maker name, PEM-encoded
// (PKCS #1, as Sprig encodes an RSA key).
func (p *keyPool) take(name string) (string, error) {
	p.mu.Lock()
	ahead := p.ahead
	p.ahead = nil
	if name == "genCA" && p.signed {
		p.ahead = make(chan madeKey, 1)
		go func(c chan<- madeKey) { c <- makeKey() }(p.ahead)
	}
	p.mu.Unlock()
	k := madeKey{}
	if ahead != nil {
		k = <-ahead
	} else {
		k = makeKey()
	}
	return k.pem, k.err
}

func makeKey() madeKey {
	k, err := rsa.GenerateKey(crand.Reader, keyBits)
	if err != nil {
		return madeKey{err: err}
	}
	return madeKey{pem: string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}))}
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
