package reason

// Error is a failure with its reason, decided once, where the failure is
// made: a classifier asks for it with errors.As rather than knowing the
// errors of every library below it.
type Error struct {
	Reason Reason
	Err    error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }
