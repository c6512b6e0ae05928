// Package tui will be `cairn top`, the terminal UI that shows barriers moving
// and names the stall; a client of the control API only.
//
// Not built yet; see the issue "cairn top".
package tui
