package suspend

import (
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// ErrSuspend is a request to suspend that cannot be taken as given (no
// reason, a duration over --suspend-max).
var ErrSuspend = errors.New("bad suspension")

// MinSuspend is the shortest suspension recond takes: its end is written
// to the second, and a shorter one would end before it is answered.
const MinSuspend = time.Second

// CheckFor says why d, asked for as a suspension's length, is refused
// (nil: it is not; --suspend-max is Check's). The one rule of the API,
// `recond suspend --for` and Suspend: a length named as 0 is refused,
// never taken as --suspend-max.
func CheckFor(d time.Duration) error {
	if d < MinSuspend {
		return fmt.Errorf("%w: %s: a duration of at least %s", ErrSuspend, d, MinSuspend)
	}
	return nil
}

// Check checks a request to suspend for d (0: max), by by, for reason
// (both trimmed), and returns the length it takes.
func Check(by, reason string, d, max time.Duration) (time.Duration, error) {
	switch {
	case Printable(reason) != reason || Printable(by) != by:
		return 0, fmt.Errorf("%w: reason and author are one line of text without control characters", ErrSuspend)
	case reason == "":
		return 0, fmt.Errorf("%w: a reason is required (it is shown to whoever wonders why the loop does not write)", ErrSuspend)
	case len(reason) > MaxText || len(by) > MaxText || !utf8.ValidString(reason) || !utf8.ValidString(by):
		return 0, fmt.Errorf("%w: reason and author are UTF-8 text of at most %d bytes", ErrSuspend, MaxText)
	case d != 0 && CheckFor(d) != nil:
		return 0, CheckFor(d)
	case d > max:
		return 0, fmt.Errorf("%w: %s is longer than --suspend-max (%s)", ErrSuspend, d, max)
	case d == 0:
		d = max
	}
	return d, nil
}

// CheckAuthor checks the author of a request to resume (trimmed).
func CheckAuthor(by string) error {
	if len(by) > MaxText || !utf8.ValidString(by) || Printable(by) != by {
		return fmt.Errorf("%w: the author is UTF-8 text of at most %d bytes", ErrSuspend, MaxText)
	}
	return nil
}
