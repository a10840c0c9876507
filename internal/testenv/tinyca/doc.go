// Package tinyca is the test bed's one certificate authority: a CA made
// for one test server (the fault proxy in front of the API server, a test
// registry with its token server), and the certificates it signs, serving
// certificates for 127.0.0.1 and a token server's signing certificate.
// Nothing here is fit for anything but tests on loopback.
package tinyca
