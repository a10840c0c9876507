// Package registry is the test bed's OCI registry: Debian's docker-registry
// (CNCF distribution 2.8) on 127.0.0.1, with basic or token auth (a token
// server here), TLS from tinyca, and a front that records requests,
// injects failures and redirects blobs; pushes of artifacts, charts and
// hand-made manifests, and OCI image layouts saved from it and loaded into
// it (what `helm push` and `cosign sign` left, kept under testdata/).
package registry
