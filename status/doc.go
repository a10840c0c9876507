// Package status serves recond's status page: what each of the last ticks
// did, read from an in-memory ring of compact tick records that the Page
// fills as a reconcile.Observer. A view never calls the API server.
//
// Handler serves the HTML pages (GET /, GET /ticks/{id}) and their JSON
// (GET /api/v1/status, whose schema is Status); TicksHandler serves GET
// /api/v1/ticks/{id}, which tells a client that asked for a sync whether its
// tick is pending, running or done. Fetch and WriteTable are `recond status
// --url`.
//
// The page shows object names, field paths and the differences the diff
// phase found, with Secret values masked as everywhere else in recond, and
// errors through their Secret-safe text (Result.FailureText,
// Operation.ErrorText); it never shows a Secret value or a credential.
// Values are text escaped by html/template alone, and a bidirectional
// formatting character on a page is shown as its code point (<U+202E>).
package status
