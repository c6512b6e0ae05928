// Package tui is `cairn top`: a terminal UI, a client of the agent's control
// API only, that shows an operator on a gateway (over SSH, at 80x24 or
// wider) whether checkpoints complete, how long they take, and which input
// holds a barrier back.
//
// It follows the agent's status stream (GET /events, at most ten statuses
// a second, which also bounds the redraws), reconnects on its own when the
// agent goes away, and announces what a restarted agent restored from.
// Everything on screen is derived from the statuses received, so views are
// tested from fixed statuses with golden files.
//
// Fleet is `cairn top --fleet`: every gateway's status (api.GatewayStatus)
// and online/offline as the broker hands them in (api.FleetMessage, fed by
// the caller's subscription), ranked worst first, with a gateway's detail
// from the statuses it received. It too is a function of its messages, the
// clock and the keys, tested the same way.
package tui
