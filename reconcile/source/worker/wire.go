package worker

import (
	"errors"
	"fmt"
	"strings"

	"recond.dev/recond/internal/reason"
	"recond.dev/recond/reconcile/source/fetch"
	"recond.dev/recond/reconcile/source/helm"
	"recond.dev/recond/reconcile/source/render"
)

// request is what the worker is asked to render.
type request struct {
	// Tree is where the source keeps the revision's files, for the kind
	// of source that named it to open them (Sources.Open).
	Tree      fetch.Location `json:"tree"`
	SHA       string         `json:"sha"`
	Dir       string         `json:"dir"`
	Limits    render.Limits  `json:"limits"`
	MaxMemory int64          `json:"maxMemory"`
	CPU       int64          `json:"cpuSeconds"` // RLIMIT_CPU; 0 for none
	// Helm is what a chart needs (a kustomization's helmCharts too).
	Helm *helm.Request `json:"helm,omitempty"`
	// Chart renders the chart at Dir; else kustomize builds it.
	Chart bool `json:"chart,omitempty"`
	// AgeKeys is the content of the age keys file that decrypts SOPS
	// files (package render), KeysFile its name and KeysErr why it could not be
	// read: the worker reads nothing of recond's.
	AgeKeys  []byte `json:"ageKeys,omitempty"`
	KeysFile string `json:"keysFile,omitempty"`
	KeysErr  string `json:"keysErr,omitempty"`
}

// header is the first line of the worker's answer; Len bytes of
// kustomize's YAML output follow it when Err is nil.
type header struct {
	Err *wireError `json:"err,omitempty"`
	Len int64      `json:"len"`
	// Sensitive are the decrypted values that are secret wherever they
	// appear (package render), as bytes: a binary value stays whole.
	Sensitive [][]byte `json:"sensitive,omitempty"`
}

// wireError carries a render error across the pipe with what callers ask
// of it: a *ManifestError's file and object, a *LimitError, and whether
// it is the clone failing to read an object.
type wireError struct {
	File      string             `json:"file,omitempty"`
	Object    string             `json:"object,omitempty"`
	Msg       string             `json:"msg"`
	Limit     *render.LimitError `json:"limit,omitempty"`
	Manifest  bool               `json:"manifest,omitempty"`
	Worker    bool               `json:"worker,omitempty"` // a *SetupError: the worker's own setup
	ReadFault bool               `json:"readFault,omitempty"`
	NoSeed    bool               `json:"noSeed,omitempty"` // ErrNoSeed
	Reason    reason.Reason      `json:"reason,omitempty"` // a *reason.Error's
	// Decrypt is a *DecryptError's file; Recipients its recipients.
	Decrypt    string   `json:"decrypt,omitempty"`
	Recipients []string `json:"recipients,omitempty"`
}

// toWire is err as it crosses the pipe: the kinds of source (src) tell
// its reason and whether it is a read of their cache that failed.
func toWire(err error, src Sources) *wireError {
	w := &wireError{Msg: err.Error(), ReadFault: src.readFault(err), NoSeed: errors.Is(err, helm.ErrNoSeed)}
	var se *reason.Error
	if errors.As(src.reason(err), &se) {
		w.Reason = se.Reason
	}
	var me *render.ManifestError
	if errors.As(err, &me) {
		w.Manifest, w.File, w.Object, w.Msg = true, me.File, me.Object, me.Err.Error()
	}
	var de *render.DecryptError
	if errors.As(err, &de) {
		w.Decrypt, w.Recipients = de.File, de.Recipients
	}
	var we *SetupError
	w.Worker = errors.As(err, &we)
	if len(w.Msg) > maxWireMsg {
		w.Msg = w.Msg[:maxWireMsg] + "... (cut)"
	}
	var le *render.LimitError
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
		err = &render.ReadError{Err: err}
	case w.NoSeed:
		err = fmt.Errorf("%s%w", strings.TrimSuffix(w.Msg, helm.ErrNoSeed.Error()), helm.ErrNoSeed)
	case w.Decrypt != "":
		err = &render.DecryptError{File: w.Decrypt, Recipients: w.Recipients, Err: err}
	case w.Worker:
		err = &SetupError{err}
	}
	if w.Reason != "" {
		err = &reason.Error{Reason: w.Reason, Err: err}
	}
	if w.Manifest {
		return &render.ManifestError{File: w.File, Object: w.Object, Err: err}
	}
	return err
}

// maxWireMsg caps an error's text on the pipe.
const maxWireMsg = 64 << 10
