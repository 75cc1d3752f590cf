// Package gettingstarted is the code of docs/GETTING-STARTED.md: a course
// with a capacity that students subscribe to (one decision), a read model of
// course sizes (one projection), and their tests. Every Go block of the guide
// is cut from these files, and TestGuideMatchesCode fails when the guide and
// the code differ, so the guide cannot drift from code that compiles and runs.
package gettingstarted
