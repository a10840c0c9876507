package leader

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/go-logr/logr"
)

// client-go's log records reach recond's log at debug level, except those
// whose error is a cancelled context: the election stopping with the
// process, which would otherwise read as a Lease failure in the log of a
// run that ended well.
func TestClientGoRecordsAtDebugWithoutCancellations(t *testing.T) {
	for _, tc := range []struct {
		name string
		log  func(logr.Logger)
		want string // "" when the record is dropped
	}{
		{"error", func(l logr.Logger) { l.Error(errors.New("etcdserver: leader changed"), "Error retrieving lease lock") },
			`level=DEBUG msg="Error retrieving lease lock" component=x err="etcdserver: leader changed"`},
		{"info", func(l logr.Logger) { l.Info("successfully acquired lease", "lock", "ns/l") },
			`level=DEBUG msg="successfully acquired lease" component=x lock=ns/l`},
		{"cancelled", func(l logr.Logger) { l.Error(context.Canceled, "Error retrieving lease lock") }, ""},
		{"cancelled, wrapped", func(l logr.Logger) {
			l.Error(fmt.Errorf("get lease: %w", context.Canceled), "Failed to update lock")
		}, ""},
		{"cancelled as a value", func(l logr.Logger) { l.Info("Lease lock not found", "err", context.Canceled) }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			h := slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug,
				ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
					if a.Key == slog.TimeKey {
						return slog.Attr{}
					}
					return a
				}})
			tc.log(logr.FromSlogHandler(debugOnly{slog.New(h).With("component", "x").Handler()}))
			if got := strings.TrimSpace(buf.String()); got != tc.want {
				t.Errorf("logged %q, want %q", got, tc.want)
			}
		})
	}
}
