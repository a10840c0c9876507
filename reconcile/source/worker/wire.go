package worker

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"recond.dev/recond/internal/reason"
	"recond.dev/recond/reconcile/source/chartspec"
	"recond.dev/recond/reconcile/source/manifest"
)

// Protocol is the version of the pipe between recond and its render
// binary: both must speak the same one (and be of the same build: Check).
const Protocol = 2

// request is what the worker is asked: a Job, the limits it sets itself,
// or (Version) only who it is.
type request struct {
	Job       `json:"job"`
	MaxMemory int64 `json:"maxMemory"`
	CPU       int64 `json:"cpuSeconds"` // RLIMIT_CPU; 0 for none
	// Version asks the worker for its build and protocol, and nothing else.
	Version bool `json:"version,omitempty"`
}

// header is the first line of the worker's answer; Len bytes of the
// objects follow it when Err is nil (a JSON document per line: wireObject).
type header struct {
	Err *wireError `json:"err,omitempty"`
	Len int64      `json:"len"`
	// Sensitive are the decrypted values that are secret wherever they
	// appear (package render), as bytes: a binary value stays whole.
	Sensitive [][]byte `json:"sensitive,omitempty"`
	// Chart, CRDs and Hooks are Result's.
	Chart *chartspec.Chart `json:"chart,omitempty"`
	CRDs  []string         `json:"crds,omitempty"`
	Hooks []string         `json:"hooks,omitempty"`
	// Build and Protocol answer a request for the version.
	Build    string `json:"build,omitempty"`
	Protocol int    `json:"protocol,omitempty"`
}

// wireObject is one manifest on the pipe.
type wireObject struct {
	File      string          `json:"file"`
	Hook      bool            `json:"hook,omitempty"`
	Generated [][]string      `json:"generated,omitempty"`
	Object    json.RawMessage `json:"object"`
}

// wireError carries a render error across the pipe with what callers ask
// of it: a *ManifestError's file and object, a *LimitError, and whether
// it is the clone failing to read an object.
type wireError struct {
	File      string               `json:"file,omitempty"`
	Object    string               `json:"object,omitempty"`
	Msg       string               `json:"msg"`
	Limit     *manifest.LimitError `json:"limit,omitempty"`
	Manifest  bool                 `json:"manifest,omitempty"`
	Worker    bool                 `json:"worker,omitempty"` // a *SetupError: the worker's own setup
	ReadFault bool                 `json:"readFault,omitempty"`
	NoSeed    bool                 `json:"noSeed,omitempty"` // ErrNoSeed
	Reason    reason.Reason        `json:"reason,omitempty"` // a *reason.Error's
	// Decrypt is a *DecryptError's file; Recipients its recipients.
	Decrypt    string   `json:"decrypt,omitempty"`
	Recipients []string `json:"recipients,omitempty"`
}

// Classify is what the worker's side knows of the kinds of source, to
// send an error with what callers ask of it: Reason gives an error its
// reason (a *reason.Error, left as it is when it already is one);
// ReadFault tells an error that is a read of a source's cache that
// failed.
type Classify struct {
	Reason    func(error) error
	ReadFault func(error) bool
}

func (c Classify) reason(err error) error {
	if c.Reason == nil {
		return err
	}
	return c.Reason(err)
}

func (c Classify) readFault(err error) bool {
	var re *manifest.ReadError
	return errors.As(err, &re) || c.ReadFault != nil && c.ReadFault(err)
}

// toWire is err as it crosses the pipe: the kinds of source (c) tell its
// reason and whether it is a read of their cache that failed.
func toWire(err error, c Classify) *wireError {
	w := &wireError{Msg: err.Error(), ReadFault: c.readFault(err), NoSeed: errors.Is(err, chartspec.ErrNoSeed)}
	var se *reason.Error
	if errors.As(c.reason(err), &se) {
		w.Reason = se.Reason
	}
	var me *manifest.ManifestError
	if errors.As(err, &me) {
		w.Manifest, w.File, w.Object, w.Msg = true, me.File, me.Object, me.Err.Error()
	}
	var de *manifest.DecryptError
	if errors.As(err, &de) {
		w.Decrypt, w.Recipients = de.File, de.Recipients
	}
	var we *SetupError
	w.Worker = errors.As(err, &we)
	if len(w.Msg) > maxWireMsg {
		w.Msg = w.Msg[:maxWireMsg] + "... (cut)"
	}
	var le *manifest.LimitError
	if errors.As(err, &le) {
		w.Limit = le
	}
	return w
}

func (w *wireError) err() error {
	var err error = errors.New(w.Msg)
	switch {
	case w.Limit != nil:
		err = w.Limit
	case w.ReadFault:
		err = &manifest.ReadError{Err: err}
	case w.NoSeed:
		err = fmt.Errorf("%s%w", strings.TrimSuffix(w.Msg, chartspec.ErrNoSeed.Error()), chartspec.ErrNoSeed)
	case w.Decrypt != "":
		err = &manifest.DecryptError{File: w.Decrypt, Recipients: w.Recipients, Err: err}
	case w.Worker:
		err = &SetupError{err}
	}
	if w.Reason != "" {
		err = &reason.Error{Reason: w.Reason, Err: err}
	}
	if w.Manifest {
		return &manifest.ManifestError{File: w.File, Object: w.Object, Err: err}
	}
	return err
}

// maxWireMsg caps an error's text on the pipe.
const maxWireMsg = 64 << 10

// maxRequest bounds a request on the pipe (the keys file is at most 256
// KiB).
const maxRequest = 1 << 20

// Served is a request as the render binary reads it (ReadRequest).
type Served struct {
	Job Job
	// MaxMemory and CPU are the limits the worker sets itself.
	MaxMemory, CPU int64
	// Version: the request asks only for the worker's version
	// (WriteVersion).
	Version bool
}

// ReadRequest reads the request on the worker's standard input.
func ReadRequest(in io.Reader) (Served, error) {
	var req request
	if err := json.NewDecoder(io.LimitReader(in, maxRequest)).Decode(&req); err != nil {
		return Served{}, err
	}
	return Served{Job: req.Job, MaxMemory: req.MaxMemory, CPU: req.CPU, Version: req.Version}, nil
}

// WriteVersion answers a request for the version with build.
func WriteVersion(out io.Writer, build string) error {
	line, _ := json.Marshal(header{Build: build, Protocol: Protocol})
	_, err := out.Write(append(line, '\n'))
	return err
}

// WriteAnswer writes the worker's answer: res, or err with what callers
// ask of it (c).
func WriteAnswer(out io.Writer, res *Result, err error, c Classify) error {
	w := bufio.NewWriter(out)
	if err != nil || res == nil {
		if err == nil {
			err = errors.New("render worker: no result")
		}
		line, _ := json.Marshal(header{Err: toWire(err, c)})
		w.Write(append(line, '\n'))
		return w.Flush()
	}
	var body []byte
	for _, m := range res.Manifests {
		obj, err := m.Object.MarshalJSON()
		if err != nil {
			return WriteAnswer(out, nil, &manifest.ManifestError{File: m.File, Err: err}, c)
		}
		line, _ := json.Marshal(wireObject{File: m.File, Hook: m.Hook, Generated: m.Generated, Object: obj})
		body = append(append(body, line...), '\n')
	}
	h := header{Len: int64(len(body)), Chart: res.Chart, CRDs: res.CRDs, Hooks: res.Hooks}
	for _, v := range res.Sensitive {
		h.Sensitive = append(h.Sensitive, []byte(v))
	}
	line, _ := json.Marshal(h)
	w.Write(append(line, '\n'))
	w.Write(body)
	return w.Flush()
}

// decodeObjects reads the objects of an answer's body.
func decodeObjects(body []byte) ([]manifest.Manifest, error) {
	var ms []manifest.Manifest
	for len(body) > 0 {
		var line []byte
		line, body, _ = bytes.Cut(body, []byte("\n"))
		var o wireObject
		if err := json.Unmarshal(line, &o); err != nil {
			return nil, fmt.Errorf("read the render worker's answer: %w", err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(o.Object); err != nil {
			return nil, fmt.Errorf("read the render worker's answer: %s: %w", o.File, err)
		}
		ms = append(ms, manifest.Manifest{File: o.File, Object: u, Hook: o.Hook, Generated: o.Generated})
	}
	return ms, nil
}
