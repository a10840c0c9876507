package source

import "recond.dev/recond/reconcile/source/git/signature"

// ErrUnsigned is the cause in a *SignatureError for a commit or tag that
// carries no signature at all.
var ErrUnsigned = signature.ErrUnsigned

// SignatureError says that a revision is not signed by a key of
// Config.TrustedKeysFile, so Fetch refused it: it is neither rendered nor
// applied. Package signature documents its causes.
type SignatureError = signature.Error
