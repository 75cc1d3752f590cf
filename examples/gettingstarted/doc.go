// Package gettingstarted is the code of docs/FAQ.md and the course example
// of docs/GETTING-STARTED.md as a package: a course with a capacity that
// students subscribe to (one decision), a read model of course sizes (one
// projection), unique usernames, invoice numbers, and their tests.
// TestGuideMatchesCode fails when a Go block of docs/FAQ.md differs from
// these files. (The guide itself is a module of its own, built and tested by
// TestGettingStarted in pgdcb's root package.)
package gettingstarted
