// Package agent will be the daemon: YAML config to graph, the event loop that
// drives the checkpoint coordinator with real time, the control API, reload,
// signals, metrics (DESIGN.md section 5).
//
// Not built yet; see the issue "The agent". Today package runtime runs a
// graph built in Go.
package agent
