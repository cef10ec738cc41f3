package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/evfwd/evfwd/pkg/admin"
	"github.com/evfwd/evfwd/pkg/webhook"
	"github.com/spf13/viper"
)

// PublicURLEnv gives Config.PublicURL over the file's public_url.
const PublicURLEnv = "EVFWD_PUBLIC_URL"

// ConfigError is a setting serve cannot run with, in words that name it (a
// flag, a key and its file, the store's path): the user's to fix, so a
// command prints it as it is and exits 2.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// InputError says that the setting is at fault (cli.ExitCode: exit 2).
func (e *ConfigError) InputError() bool { return true }

func configErrorf(format string, a ...any) error {
	return &ConfigError{fmt.Errorf(format, a...)}
}

// File is a config file as ReadFile and LoadConfig read it.
type File struct {
	Name  string       // its path, for messages; "" when none was read
	Viper *viper.Viper // the file as viper read it; nil reads nothing
	// JSONAt gives the value at path (keys, and indexes into lists) as
	// the file holds it, keys in their order and case, which viper's maps
	// lose and a destination's mapping needs; nil keeps viper's.
	JSONAt func(path ...any) (_ []byte, ok bool, err error)
}

// where names the file in messages.
func (f File) where() string {
	if f.Name == "" {
		return "config"
	}
	return "config " + f.Name
}

// ReadFile decodes f's settings into base through Config's mapstructure
// tags, so that a key is named once, by its field: what the file does not
// set keeps base's value. It does not validate them.
func ReadFile(f File, base Config) (Config, error) {
	cfg := base
	if f.Viper == nil {
		return cfg, nil
	}
	if err := f.Viper.Unmarshal(&cfg); err != nil {
		return cfg, configErrorf("%s: %v", f.where(), err)
	}
	if f.JSONAt == nil {
		return cfg, nil
	}
	for i := range cfg.Sources {
		for j := range cfg.Sources[i].Destinations {
			d := &cfg.Sources[i].Destinations[j]
			if d.Mapping == nil {
				continue
			}
			raw, ok, err := f.JSONAt("sources", i, "destinations", j, "mapping")
			if err != nil {
				return cfg, configErrorf("%s: sources[%d].destinations[%d].mapping: %v", f.where(), i, j, err)
			}
			if ok {
				d.Mapping = json.RawMessage(raw)
			}
		}
	}
	return cfg, nil
}

// Flags are the settings `evfwd serve` takes from its flags, beside the
// file. They replace the file's values of the same settings as they are:
// the command has filled a flag not given from EVFWD_* and the file.
type Flags struct {
	Addr      string
	Store     string // "": SQLite, DefaultStorePath
	Retention time.Duration
	TLSCert   string
	TLSKey    string
	// ForwardTo are the dev source's endpoints: only without configured
	// sources.
	ForwardTo []string
	UI        bool
	UIAddr    string
	// Check writes nothing: dev keys or a dev admin token not made yet
	// are made up for the one run.
	Check bool
	// Getenv reads EVFWD_ADMIN_TOKEN, EVFWD_PUBLIC_URL and the state
	// directory's variables (StateDir); nil: os.Getenv.
	Getenv func(string) string
}

// Loaded is LoadConfig's result: the config, and what serve made up for it.
type Loaded struct {
	Config
	Dev bool // no sources configured: Sources is the dev source alone
	// DevTokenFile, with UI in dev mode, keeps the admin token made for
	// the inspector.
	DevTokenFile string
}

// LoadConfig assembles serve's configuration: the file's settings
// (ReadFile), fl's over them, EVFWD_ADMIN_TOKEN and EVFWD_PUBLIC_URL over
// those, the default store; without configured sources the dev source
// (DevSource, given fl.ForwardTo's endpoints), and with fl.UI in dev mode
// the dev admin token (DevAdminToken). It then checks the whole as New
// would (Config.Check). A setting at fault is a *ConfigError naming it.
func LoadConfig(f File, fl Flags) (Loaded, error) {
	var l Loaded
	if fl.Getenv == nil {
		fl.Getenv = os.Getenv
	}
	if (fl.TLSCert == "") != (fl.TLSKey == "") {
		return l, configErrorf("--tls-cert and --tls-key go together")
	}
	cfg, err := ReadFile(f, Config{})
	if err != nil {
		return l, err
	}
	cfg.Addr, cfg.Store, cfg.Retention = fl.Addr, fl.Store, fl.Retention
	cfg.TLSCert, cfg.TLSKey = fl.TLSCert, fl.TLSKey
	if u := fl.Getenv(PublicURLEnv); u != "" {
		cfg.PublicURL = u
	}
	// The admin token is a secret: the file or the environment, no flag.
	if tok := fl.Getenv(admin.TokenEnv); tok != "" {
		cfg.AdminToken = tok
	}
	if cfg.Store == "" {
		cfg.Store = "sqlite://" + DefaultStorePath(fl.Getenv)
	}
	l.Config = cfg
	if fl.UI {
		if err := l.inspector(fl); err != nil {
			return l, err
		}
	}
	if err := l.devSource(f, fl); err != nil {
		return l, err
	}
	if err := l.Check(); err != nil {
		msg := strings.ReplaceAll(err.Error(), "\n", "\n  ")
		return l, configErrorf("%s:\n  %s", f.where(), msg)
	}
	return l, nil
}

// inspector gives the inspector its admin token: in dev mode (no token, no
// sources) the one kept in the state dir, which serve prints the path of.
func (l *Loaded) inspector(fl Flags) error {
	if l.AdminToken == "" && len(l.Sources) == 0 {
		dir := StateDir(fl.Getenv)
		l.DevTokenFile = DevAdminTokenPath(dir)
		if _, err := os.Stat(l.DevTokenFile); fl.Check && err != nil {
			l.AdminToken = AdminToken() // masked in the output anyway
		} else if l.AdminToken, err = DevAdminToken(dir); err != nil {
			return err
		}
	}
	if l.AdminToken == "" {
		return configErrorf("--ui needs the admin token, which the page asks for: set admin_token in the config or %s", admin.TokenEnv)
	}
	if _, _, err := net.SplitHostPort(fl.UIAddr); err != nil {
		return configErrorf("--ui-addr %q: want HOST:PORT, such as %s", fl.UIAddr, DefaultUIAddr)
	}
	return nil
}

// devSource gives l the dev source, with the --forward-to endpoints, when
// no sources are configured: no config file, or one with other settings
// only (a client's endpoint and write-key, an addr). Configured sources
// are never topped up with it, and --forward-to beside them is an error:
// their endpoints belong in the file.
func (l *Loaded) devSource(f File, fl Flags) error {
	if len(l.Sources) > 0 {
		if len(fl.ForwardTo) > 0 {
			return configErrorf("--forward-to is for the dev source serve runs without configured sources; config %s: sources take their endpoints from the file", f.Name)
		}
		return nil
	}
	dir := StateDir(fl.Getenv)
	var src Source
	if _, err := os.Stat(DevSourcePath(dir)); fl.Check && err != nil {
		// Keys serve would make, masked in the output anyway.
		src = Source{Name: DevSourceName, WriteKey: "new", Webhooks: Webhooks{Destination: webhook.Destination{SharedSecret: "new"}}}
	} else if src, err = DevSource(dir); err != nil {
		return err
	}
	for _, u := range fl.ForwardTo {
		src.Webhooks.Endpoints = append(src.Webhooks.Endpoints, webhook.Endpoint{URL: u})
	}
	if src.Webhooks.Enabled = len(src.Webhooks.Endpoints) > 0; src.Webhooks.Enabled {
		errs := unjoin(src.Webhooks.Validate())
		if !l.AllowPrivateEndpoints {
			errs = append(errs, unjoin(src.Webhooks.CheckAddresses())...)
		}
		if err := webhook.SettingErrors(errors.Join(errs...), "--forward-to", ""); err != nil {
			return &ConfigError{err}
		}
	}
	l.Sources, l.Dev = []Source{src}, true
	return nil
}
