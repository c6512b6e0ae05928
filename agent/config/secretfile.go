package config

import (
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/dustin/go-humanize"
)

// A file that holds a secret (a password, a key, the control API's token:
// every *_file a pipeline names but ca_file and cert_file, which hold
// certificates) is refused when its group or other users may read it,
// whoever they are: the group of the .deb's agent, `cairn`, is also the
// control group, whose members (operators) may use the control socket,
// not the broker's password or the storage's key. One rule, here, for
// `cairn validate`, for `cairn run` (both through Load, at the setting's
// position) and for the agent when it reads the file (ReadSecret).

// maxSecretBytes is the most a secret file may hold: far more than a
// password, a token or a PEM key.
const maxSecretBytes = 64 << 10

// exposed says why a secret file of mode m may not be used, if it may
// not: its group or other users may read it. It names neither the file
// nor what it holds.
func exposed(m fs.FileMode) error {
	if m.Perm()&0o044 == 0 {
		return nil
	}
	return fmt.Errorf("may be read by its group or by other users (mode %v): chmod go-r it", m.Perm())
}

// ReadSecret reads the secret file at path, refusing one its group or
// other users may read, or one over 64 KiB; the error names the file,
// never what it holds.
func ReadSecret(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := exposed(st.Mode()); err != nil {
		return nil, fmt.Errorf("%s %w", path, err)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSecretBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxSecretBytes {
		return nil, fmt.Errorf("%s holds more than %s, more than any secret", path, humanize.IBytes(maxSecretBytes))
	}
	return b, nil
}
