//go:build !unix

package main

import "time"

// cpuTime is not measured here: the demo then reports 0% CPU.
func cpuTime() time.Duration { return 0 }
