package mqttio

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"syscall"

	"github.com/mochi-mqtt/server/v2/packets"
)

// brokerLog is the embedded broker's log handler, between mochi and the
// agent's. mochi logs whole packets with some errors, payloads and MQTT 5
// authentication data included: brokerLog keeps only their type. And a
// client that goes away while the broker writes to it — every sink as the
// agent stops — is no warning: such records go down to debug, and the
// listener's, which have no message, get one.
type brokerLog struct{ slog.Handler }

func (h brokerLog) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		switch v := a.Value.Any().(type) {
		case packets.Packet:
			a.Value = slog.StringValue(packets.PacketNames[v.FixedHeader.Type])
		case *packets.Packet:
			a.Value = slog.StringValue(packets.PacketNames[v.FixedHeader.Type])
		case error:
			if clientGone(v) && out.Level > slog.LevelDebug {
				out.Level = slog.LevelDebug
			}
		}
		out.AddAttrs(a)
		return true
	})
	if out.Message == "" {
		out.Message = "client connection ended"
	}
	if out.Level != r.Level && !h.Handler.Enabled(ctx, out.Level) {
		return nil // went down below the agent's level
	}
	return h.Handler.Handle(ctx, out)
}

func (h brokerLog) WithAttrs(as []slog.Attr) slog.Handler { return brokerLog{h.Handler.WithAttrs(as)} }
func (h brokerLog) WithGroup(name string) slog.Handler    { return brokerLog{h.Handler.WithGroup(name)} }

// clientGone reports whether err says the client's connection closed.
func clientGone(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}
