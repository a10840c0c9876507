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
// The pages are written by plain Go writers (html.go), not html/template,
// whose calls of methods by name would cost the daemon the linker's
// dead-method elimination. Values are escaped once, as HTML text or
// attribute values, URLs in a link checked and normalized (escape.go), and
// a bidirectional formatting character on a page is shown as its code
// point (<U+202E>).
package status
