// Package api will hold the wire types of the agent's control API, shared by
// the agent and its clients (the CLI and the terminal UI). It imports only
// the standard library.
//
// Not built yet; see the issue "The agent".
package api
