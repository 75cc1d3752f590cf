// Package faq is the code of docs/FAQ.md as a package: a course with a
// capacity that students subscribe to, unique usernames and invoice
// numbers, with their tests. TestGuideMatchesCode fails when a Go block of
// docs/FAQ.md differs from these files. (docs/GETTING-STARTED.md is a module
// of its own, built and tested by TestGettingStarted in the root package.)
package faq
