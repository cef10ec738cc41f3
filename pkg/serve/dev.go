package serve

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/evfwd/evfwd/pkg/webhook"
)

// DevSourceName names the source serve runs with when none is configured.
const DevSourceName = "dev"

// devFile holds the dev source's keys in the state directory, beside the
// default store, so that a second run accepts the key a first one printed.
const devFile = "dev-source.json"

type devKeys struct {
	WriteKey     string `json:"write_key"`
	SharedSecret string `json:"shared_secret"`
}

// StateDir is evfwd's state directory: $XDG_STATE_HOME/evfwd, else
// ~/.local/state/evfwd.
func StateDir(getenv func(string) string) string {
	if dir := getenv("XDG_STATE_HOME"); dir != "" {
		return filepath.Join(dir, "evfwd")
	}
	home := getenv("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	return filepath.Join(home, ".local", "state", "evfwd")
}

// DevSource returns the local development source: name "dev", a write key
// and a shared secret generated on first use and kept in stateDir (file
// mode 0600), webhooks disabled until the caller gives it endpoints. Two
// processes starting together agree on one pair: the file appears whole,
// by a link, or not at all.
func DevSource(stateDir string) (Source, error) {
	path := filepath.Join(stateDir, devFile)
	keys, err := readDevKeys(path)
	if errors.Is(err, os.ErrNotExist) {
		keys, err = createDevKeys(stateDir, path)
	}
	if err != nil {
		return Source{}, err
	}
	return Source{
		Name:     DevSourceName,
		WriteKey: keys.WriteKey,
		Webhooks: Webhooks{Destination: webhook.Destination{SharedSecret: keys.SharedSecret}},
	}, nil
}

// DevSourcePath is where DevSource keeps its keys.
func DevSourcePath(stateDir string) string { return filepath.Join(stateDir, devFile) }

func readDevKeys(path string) (devKeys, error) {
	var k devKeys
	b, err := os.ReadFile(path)
	if err != nil {
		return k, err
	}
	if err := json.Unmarshal(b, &k); err != nil || k.WriteKey == "" || k.SharedSecret == "" {
		return k, fmt.Errorf("dev source %s: not a dev key file (remove it to get new keys)", path)
	}
	return k, nil
}

func createDevKeys(dir, path string) (devKeys, error) {
	k := devKeys{WriteKey: "wk_dev_" + randomHex(16), SharedSecret: "whsec_dev_" + randomHex(24)}
	b, _ := json.MarshalIndent(k, "", "  ")
	made, err := createOnce(dir, devFile, append(b, '\n'))
	if err != nil {
		return k, fmt.Errorf("dev source: %w", err)
	}
	if !made {
		return readDevKeys(path) // another serve made it first
	}
	return k, nil
}

// createOnce writes data to dir/name, readable by its owner only, unless
// that file exists: made is false then. Two processes starting together
// agree on one content: the file appears whole, by a link, or not at all.
func createOnce(dir, name string, data []byte) (made bool, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, err
	}
	tmp, err := os.CreateTemp(dir, name+".*") // 0600
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp.Name())
	if err := writeClose(tmp, data); err != nil {
		return false, err
	}
	if err := os.Link(tmp.Name(), filepath.Join(dir, name)); errors.Is(err, os.ErrExist) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	return true, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// devTokenFile holds the admin token serve makes for its inspector (--ui)
// in dev mode, beside the dev source's keys.
const devTokenFile = "dev-admin-token"

// DevAdminTokenPath is where DevAdminToken keeps the token.
func DevAdminTokenPath(stateDir string) string { return filepath.Join(stateDir, devTokenFile) }

// DevAdminToken returns the admin token of `serve --ui` in dev mode (no
// config file, no token given): AdminToken generated on first use and kept
// in stateDir (mode 0600), so that a restart keeps the page's login. Two
// processes starting together agree on one: the file appears whole, by a
// link, or not at all. A file that holds a weak token is an error.
func DevAdminToken(stateDir string) (string, error) {
	path := DevAdminTokenPath(stateDir)
	read := func() (string, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", err
		}
		tok := strings.TrimSpace(string(b))
		if err := CheckAdminToken(tok); err != nil || tok == "" {
			return "", fmt.Errorf("dev admin token %s: not a token of at least %d characters (remove it to get a new one)", path, MinAdminTokenLen)
		}
		return tok, nil
	}
	tok, err := read()
	if !errors.Is(err, os.ErrNotExist) {
		return tok, err
	}
	tok = AdminToken()
	made, err := createOnce(stateDir, devTokenFile, []byte(tok+"\n"))
	if err != nil {
		return "", fmt.Errorf("dev admin token: %w", err)
	}
	if !made {
		return read() // another serve made it first
	}
	return tok, nil
}
