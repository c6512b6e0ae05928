package config

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
)

// namedFile is a file a config names: the field holding its path, the
// field's name in errors, where to report it if the file did not say, and
// whether it holds a secret (secretfile.go).
type namedFile struct {
	path   *string
	name   string
	def    Pos
	secret bool
}

// files are the files c names, in a stable order.
func (c *Config) files() []namedFile {
	out := []namedFile{{&c.Agent.APITokenFile, "agent.api_token_file", c.Agent.Pos, true}}
	for _, name := range slices.Sorted(maps.Keys(c.Brokers)) {
		b := c.Brokers[name]
		for _, f := range []struct {
			path   *string
			field  string
			secret bool
		}{{&b.PasswordFile, "password_file", true}, {&b.CAFile, "ca_file", false}, {&b.CertFile, "cert_file", false}, {&b.KeyFile, "key_file", true}} {
			out = append(out, namedFile{f.path, fmt.Sprintf("broker %q: %s", name, f.field), b.Pos, f.secret})
		}
		for _, u := range b.Users {
			out = append(out, namedFile{&u.PasswordFile, fmt.Sprintf("broker %q: user %s: password_file", name, c.show(&u.Username)), u.Pos, true})
		}
	}
	if r := c.Remote; r != nil {
		out = append(out, namedFile{&r.AccessKeyFile, "remote: access_key_file", r.Pos, true},
			namedFile{&r.SecretKeyFile, "remote: secret_key_file", r.Pos, true}, namedFile{&r.CAFile, "remote: ca_file", r.Pos, false})
	}
	return out
}

// checkFiles resolves the files c names, if relative, against the
// directory of the pipeline file at path, as it does data_dir (the agent
// opens them where they resolve), and finds those it cannot read, and the
// secret ones that others than their owner may (exposed). It reads none: what is wrong inside a file (a CA file without a
// certificate, say) the agent finds when it opens it; and it names no
// secret, nor a path from the environment. A file whose field already has
// an error (an unset ${VAR}) is not looked for.
func (c *Config) checkFiles(path string, errs Errors) Errors {
	reported := make(map[Pos]bool)
	for _, e := range errs {
		reported[e.Pos] = true
	}
	var found Errors
	for _, f := range c.files() {
		if *f.path == "" {
			continue
		}
		p := c.at(f.path, f.def)
		given := *f.path
		*f.path = besideFile(path, given)
		if reported[p] {
			continue
		}
		err := readable(*f.path)
		if err == nil && f.secret {
			err = exposedFile(*f.path)
		}
		if err != nil {
			where := *f.path
			switch {
			case c.fromEnv(f.path):
				where = c.show(f.path) // the text in the file, not the path
			case given != *f.path:
				where = fmt.Sprintf("%s (%s, beside the pipeline file)", given, *f.path)
			}
			found = append(found, Error{File: path, Pos: p, Msg: fmt.Sprintf("%s %s: %v", f.name, where, err)})
		}
	}
	return found
}

// readable reports why the file at path cannot be read, if it cannot: it
// is not there, not to be opened by this user, or a directory. A FIFO or
// a device is not opened, which could wait for a writer.
func readable(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return pathErr(err)
	}
	switch {
	case st.IsDir():
		return errors.New("is a directory, not a file")
	case !st.Mode().IsRegular():
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return pathErr(err)
	}
	return f.Close()
}

// exposedFile says why the secret file at path may not be used, if it may
// not (exposed).
func exposedFile(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return pathErr(err)
	}
	return exposed(st.Mode())
}

// pathErr is err without the operation and path it names.
func pathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// besideFile resolves dir, if relative, against the directory of the file
// at path.
func besideFile(path, dir string) string {
	if filepath.IsAbs(dir) {
		return dir
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	return filepath.Join(filepath.Dir(path), dir)
}

// Watched is a broker of a pipeline file as a client that only watches
// it reads it (`cairn top --fleet`): its settings, with the files it
// names resolved beside the pipeline file, and its status_topic as the
// file writes it, ${VAR} and all, which says where every gateway's
// name goes.
type Watched struct {
	*Broker
	WrittenStatusTopic string
}

// WatchedBrokers reads the brokers of the file at path for a client that
// only watches them: the rest of the file may have errors, or need
// variables this shell lacks, which are left as written. An error is
// returned only when the file cannot be read or parsed at all.
func WatchedBrokers(path string) (map[string]Watched, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	c, errs := Parse(path, data, func(name string) (string, bool) {
		if v, ok := osLookup(name); ok {
			return v, true
		}
		return "${" + name + "}", true
	})
	if c.Pos == (Pos{}) {
		return nil, errs // not YAML, or not a mapping
	}
	out := make(map[string]Watched, len(c.Brokers))
	for name, b := range c.Brokers {
		for _, f := range []*string{&b.PasswordFile, &b.CAFile, &b.CertFile, &b.KeyFile} {
			if *f != "" {
				*f = besideFile(path, *f)
			}
		}
		w := Watched{Broker: b, WrittenStatusTopic: c.AsWritten(&b.StatusTopic)}
		out[name] = w
	}
	return out, nil
}
