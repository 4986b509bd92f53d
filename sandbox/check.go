// SPDX-License-Identifier: Apache-2.0

package sandbox

// Level says how much of a layer this machine gives.
type Level int

// Levels of a Layer.
const (
	Full    Level = iota // everything the layer promises
	Partial              // in force, but part of it is missing (Detail says which)
	Missing              // not available: sessions refuse to start with it, or go without
)

// Layer is one layer of the sandbox as `sluice check` reports it.
type Layer struct {
	Name   string
	Level  Level
	Detail string // what is in force, or why not
	Fix    string // what would make it Full
}
