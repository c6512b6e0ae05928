package tui

import (
	tea "charm.land/bubbletea/v2"

	"github.com/cairn-edge/cairn/agent/api"
)

// Run shows the UI of the agent behind client on the terminal until the
// user quits.
func Run(client *api.Client, opts Options) error {
	m := New(client, opts)
	defer m.cancel()
	_, err := tea.NewProgram(m, tea.WithFPS(10)).Run()
	return err
}
