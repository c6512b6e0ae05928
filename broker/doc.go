// Package broker is cairn's embedded MQTT server (a pipeline file's
// `brokers.<name>.embedded: true`): mochi-mqtt, used through its hooks
// and listener interface, not forked. It is the gateway's MQTT server
// for the devices on loopback (a pipeline file's default: DefaultAddr)
// or on the plant network; the agent's own sources and sinks reach it
// on a socket of their own (Server.DialAgent). docs/security.md says in
// full what it promises, docs/mqtt.md what it does not.
//
// What it promises:
//
//   - Whom it lets in: the users of Config.Users, by name and password,
//     and clients without a user name only with Config.AllowAnonymous.
//     The agent's own clients log in with credentials made for the
//     process (Server.Credentials) on a unix socket that only the
//     process may connect to; no one else may connect under their
//     client ids (Config.OwnClientIDs), nor under the client id of
//     another user's session.
//   - What each may publish and subscribe to: Grants, in mosquitto's
//     ACL model, by user (Config.Grants, AnonymousGrants). Whatever they
//     grant, only the agent's own clients publish to the agent's topics
//     (Config.AgentTopics), and no client to $SYS topics.
//   - What its clients may make it hold and do: Limits bound the
//     clients of Config.Addr (connections, as they are accepted and per
//     address, sessions, topic levels and length, filters,
//     subscriptions, the messages and bytes queued for a session and
//     for all, retained messages, large packets being received, a
//     client that reads nothing), and a packet is MaxPacket at most.
//     No one address takes what the others need: its sessions hold
//     MaxQueuedBytesPerAddress at most. Sessions whose client is gone
//     never take what connected ones need: together (those of one
//     address) they hold at most half of MaxQueuedBytesTotal (of
//     MaxQueuedBytesPerAddress) and what connected sessions leave of
//     it, each keeping its newest messages; one ends after
//     OfflineSessionExpiry, by the monotonic clock, and the one offline
//     longest ends for a new session over MaxClients or
//     MaxSessionsPerAddress.
//   - What it refuses is logged at most once a minute for each address
//     and kind, with a count and never a password or a packet's
//     contents, and counted (Server.Refusals, OfflineDrops,
//     EndedSessions).
//   - What a publish on the agent's sources' topics is acknowledged for:
//     a QoS 1 or 2 publish on a topic a durable source reads
//     (Config.Reads) is handed to the source in this process
//     (Server.Attach) and acknowledged to its client, retained and
//     delivered to its subscribers only once the source has it durable
//     in its ingest log; each client's acknowledgements keep the order
//     of its publishes, and a client holds at most a bounded number of
//     publishes waiting before its connection is read no further.
//
// What it does not: it keeps sessions in memory, so they do not survive
// the process, nor do the messages it queued for other subscribers than
// the agent's sources. Two habits of mochi 2.7 come with it for those
// subscribers: a message published while a client takes over its
// persistent session can be lost to that client, and a resumed
// session's queued messages are redelivered ordered only by the second
// they arrived in.
package broker
