package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cairn-edge/cairn/agent"
	"github.com/cairn-edge/cairn/agent/config"
	"github.com/cairn-edge/cairn/tui"
)

// topOptions are cairn top's flags beyond -c and --data-dir: the stall
// threshold, and those of the fleet view.
type topOptions struct {
	stall                     time.Duration
	fleet                     bool
	broker, topic             string
	username, passwordFile    string
	caFile, certFile, keyFile string
}

func (t *topOptions) declare(fs *flag.FlagSet) {
	fs.DurationVar(&t.stall, "stall", time.Second, "highlight barrier alignments longer than this `DURATION`")
	fs.BoolVar(&t.fleet, "fleet", false, "every gateway on one screen, from the statuses they publish to a broker")
	fs.StringVar(&t.broker, "broker", "", "--fleet: the broker, a `URL` (tcp://host:1883, ssl://host:8883), or the name of one in the -c file (default: its one with a status_topic)")
	fs.StringVar(&t.topic, "topic", "", "--fleet: the gateways' status topics, a `FILTER`, + where a gateway's name is (default: the -c file's status_topic, + for each ${VAR} level)")
	fs.StringVar(&t.username, "username", "", "--fleet: the `USER` name to log in with (default: the -c file's broker's)")
	fs.StringVar(&t.passwordFile, "password-file", "", "--fleet: a `FILE` holding the password (default: the -c file's broker's)")
	fs.StringVar(&t.caFile, "ca-file", "", "--fleet: a `FILE` of PEM certificates of the authorities that vouch for the broker's")
	fs.StringVar(&t.certFile, "cert-file", "", "--fleet: a `FILE` holding a client certificate, PEM, with --key-file")
	fs.StringVar(&t.keyFile, "key-file", "", "--fleet: a `FILE` holding the client certificate's private key, PEM")
}

// cmdTop runs the terminal UI against the agent on the data directory (it
// waits for an agent that is not running yet) or, with --fleet, against
// every gateway's status on a broker.
func cmdTop(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
	var t topOptions
	file, dataDir, code, ok := flags(fs, args, stdout, t.declare)
	if !ok {
		return code
	}
	if t.fleet {
		return topFleet(fs, file, t, stderr)
	}
	for _, f := range []string{"broker", "topic", "username", "password-file", "ca-file", "cert-file", "key-file"} {
		if set(fs, f) {
			return usageError(fs, "--%s is a flag of --fleet", f)
		}
	}
	if dataDir == "" {
		if file == "" {
			return usageError(fs, "-c FILE or --data-dir DIR is required")
		}
		var err error
		if dataDir, err = config.DataDir(file); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
	}
	if err := tui.Run(client(dataDir), tui.Options{Stall: t.stall}); err != nil {
		fmt.Fprintln(stderr, "cairn top:", err)
		return 1
	}
	return 0
}

// set reports whether the flag name was given.
func set(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// topFleet runs the fleet view: the broker from the file, the flags
// overriding it, or from the flags alone.
func topFleet(fs *flag.FlagSet, file string, t topOptions, stderr io.Writer) int {
	var b agent.FleetBroker
	switch {
	case file != "" && !strings.Contains(t.broker, "://"):
		var err error
		if b, err = agent.FleetBrokerOf(file, t.broker); err != nil {
			fmt.Fprintln(stderr, "cairn top:", err)
			return 2
		}
	case t.broker == "":
		return usageError(fs, "--fleet needs -c FILE (a pipeline file naming the broker) or --broker URL")
	default:
		b.URL = t.broker
	}
	for _, o := range []struct {
		flag string
		to   *string
	}{{t.topic, &b.Topic}, {t.username, &b.Username}, {t.caFile, &b.CAFile}, {t.certFile, &b.CertFile}, {t.keyFile, &b.KeyFile}} {
		if o.flag != "" {
			*o.to = o.flag
		}
	}
	if t.passwordFile != "" {
		pw, err := agent.ReadSecret(t.passwordFile)
		if err != nil {
			fmt.Fprintln(stderr, "cairn top: --password-file:", err)
			return 2
		}
		b.Password = pw
	}
	if b.Topic == "" {
		return usageError(fs, "--fleet needs --topic (such as gateways/+/status) when the file's status_topic does not say it")
	}
	ui := tui.NewFleet(tui.FleetOptions{Source: b.String(), Topic: b.Topic, Stall: t.stall})
	stop, err := agent.WatchFleet(b, ui.Message, ui.Link)
	if err != nil {
		fmt.Fprintln(stderr, "cairn top:", err)
		return 2
	}
	defer stop()
	if err := tui.RunFleet(ui); err != nil {
		fmt.Fprintln(stderr, "cairn top:", err)
		return 1
	}
	return 0
}
