package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"
)

// EnvPrefix starts every environment variable evfwd reads.
const EnvPrefix = "EVFWD_"

// annotationEnv marks a flag that an EVFWD_* variable may set.
const annotationEnv = "evfwd_env"

// Config is the settings file: flag > EVFWD_* environment > file > default.
// Keys are flag names, at the top level (shared settings such as endpoint)
// or under a command's name (listen: {addr: ...}), beside the structured
// settings a command declares with ReadsConfig (serve's sources). A key
// none of these is refused (strict.go).
type Config struct {
	File string // the file read, "" when none
	v    *viper.Viper
	doc  *yaml.Node // the file's keys, with their lines where the format has them
	// origins says where Apply took each flag's value from (Origin).
	origins map[string]string
}

// DefaultConfigFile is $XDG_CONFIG_HOME/evfwd/config.yaml, falling back to
// the platform's user config directory.
func DefaultConfigFile() string {
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		var err error
		if dir, err = os.UserConfigDir(); err != nil {
			return ""
		}
	}
	return filepath.Join(dir, "evfwd", "config.yaml")
}

// LocalConfigFile is the config file of a project, in the working
// directory: the file `evfwd serve init` writes.
const LocalConfigFile = "./evfwd.yaml"

// ConfigSearch is where a command's config file may come from, in the
// order FindConfig tries them.
type ConfigSearch struct {
	Flag    string // --config's value
	FlagSet bool   // --config was given; --config '' reads no file
	Env     string // EVFWD_CONFIG
	Local   string // LocalConfigFile, "" to skip
	User    string // DefaultConfigFile, "" to skip
}

// FindConfig says which file to read, and whether the user named it (a
// named file must exist): --config, else EVFWD_CONFIG, else the first of
// the working directory's evfwd.yaml and the user config dir's file that
// exists; "" when none.
func FindConfig(s ConfigSearch) (path string, explicit bool) {
	switch {
	case s.FlagSet:
		return s.Flag, s.Flag != ""
	case s.Env != "":
		return s.Env, true
	}
	for _, p := range []string{s.Local, s.User} {
		if p == "" {
			continue
		}
		// A file there that cannot be read is still the one meant:
		// LoadConfig says why it cannot.
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			return p, false
		}
	}
	return "", false
}

// LoadConfig reads path. A missing file is fine unless the user named it
// (explicit); a broken one is an error naming the file and line.
func LoadConfig(path string, explicit bool) (*Config, error) {
	c := &Config{v: viper.New()}
	if path == "" {
		return c, nil
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) && !explicit {
		return c, nil
	}
	c.v.SetConfigFile(path)
	if filepath.Ext(path) == "" {
		c.v.SetConfigType("yaml")
	}
	if err := c.v.ReadInConfig(); err != nil {
		var parse viper.ConfigParseError
		if errors.As(err, &parse) {
			// viper wraps "yaml: line N: ..." in its own prose.
			msg := err.Error()
			if i := strings.Index(msg, "yaml: "); i >= 0 {
				msg = msg[i:]
			}
			return nil, UsageErrorf("config %s: %s", path, msg)
		}
		return nil, UsageErrorf("config %s: %v", path, err)
	}
	c.File = path
	c.doc = parseKeys(path, c.v)
	return c, nil
}

// parseKeys reads the file a second time, into a yaml.Node, as viper keeps
// neither a key's line nor the order and case of keys: the strict check
// and Origin name lines, and JSONAt gives a mapping's keys as written.
// YAML, and JSON (which YAML reads); other formats from what viper read,
// without lines.
func parseKeys(path string, v *viper.Viper) *yaml.Node {
	var doc yaml.Node
	switch strings.ToLower(filepath.Ext(path)) {
	case "", ".yaml", ".yml", ".json":
		if b, err := os.ReadFile(path); err == nil && yaml.Unmarshal(b, &doc) == nil {
			return &doc
		}
	}
	doc = yaml.Node{}
	if err := doc.Encode(v.AllSettings()); err != nil {
		return nil
	}
	return &doc
}

// Viper exposes the parsed file for commands with structured config (serve).
func (c *Config) Viper() *viper.Viper { return c.v }

// Lookup returns the file's value for key under section, else top level.
func (c *Config) Lookup(section, key string) (string, bool) {
	val, _, ok := c.lookup(section, key, true)
	return val, ok
}

// lookup is Lookup reading the top level only when top; at is the key
// read, dotted.
func (c *Config) lookup(section, key string, top bool) (val, at string, ok bool) {
	for i, k := range []string{section + "." + key, key, section + "." + underscore(key), underscore(key)} {
		if i%2 == 1 && !top || strings.HasPrefix(k, ".") || !c.v.IsSet(k) {
			continue
		}
		v := c.v.Get(k)
		if list, ok := v.([]any); ok {
			parts := make([]string, len(list))
			for i, p := range list {
				parts[i] = fmt.Sprint(p)
			}
			return strings.Join(parts, ","), k, true
		}
		return fmt.Sprint(v), k, true
	}
	return "", "", false
}

func underscore(s string) string { return strings.ReplaceAll(s, "-", "_") }

// EnvName is the environment variable for a flag: --write-key is
// EVFWD_WRITE_KEY.
func EnvName(flag string) string { return EnvPrefix + strings.ToUpper(underscore(flag)) }

// annotate sets key to value on cmd's flag name, local or persistent.
func annotate(cmd *cobra.Command, name, key, value string) *pflag.Flag {
	f := cmd.Flags().Lookup(name)
	if f == nil {
		f = cmd.PersistentFlags().Lookup(name)
	}
	if f == nil {
		panic("cli: " + cmd.Name() + " has no flag " + name)
	}
	if f.Annotations == nil {
		f.Annotations = map[string][]string{}
	}
	f.Annotations[key] = []string{value}
	return f
}

// BindEnv lets EVFWD_<NAME> set each named flag, and says so in its help.
func BindEnv(cmd *cobra.Command, names ...string) {
	for _, name := range names {
		annotate(cmd, name, annotationEnv, EnvName(name)).Usage += " (env " + EnvName(name) + ")"
	}
}

// annotationURL marks a flag whose value is a URL (MarkURLFlags).
const annotationURL = "evfwd_url"

// MarkURLFlags says the named flags hold URLs: a value from the
// environment or the config file without its scheme is refused by Apply
// naming where it came from (EVFWD_ENDPOINT, the file and key), where the
// command's own CheckURLScheme could only name the flag, which nobody typed.
func MarkURLFlags(cmd *cobra.Command, names ...string) {
	for _, name := range names {
		annotate(cmd, name, annotationURL, "true")
	}
}

// annotationOwner marks the command that owns the file's top level
// (OwnsTopLevel); annotationShares, a flag of another command that reads
// the owner's key of its name all the same (SharesTopLevel).
const (
	annotationOwner  = "evfwd_owns_top_level"
	annotationShares = "evfwd_shares_top_level"
)

// OwnsTopLevel says that a top-level key named like one of cmd's flags is
// cmd's setting: serve's addr, as serve init writes it. Another command
// with a flag of that name reads it under its own name only (listen:
// {addr: ...}), unless SharesTopLevel says that it means cmd's setting.
func OwnsTopLevel(cmd *cobra.Command) {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[annotationOwner] = "true"
}

// SharesTopLevel says that cmd's named flags read the top-level keys of
// their names though another command owns them (OwnsTopLevel): deliveries'
// --store is serve's store.
func SharesTopLevel(cmd *cobra.Command, names ...string) {
	for _, name := range names {
		annotate(cmd, name, annotationShares, "true")
	}
}

// ownedElsewhere are the flag names whose top-level keys a command other
// than cmd owns (OwnsTopLevel).
func ownedElsewhere(cmd *cobra.Command) map[string]bool {
	owned := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c != cmd && c.Annotations[annotationOwner] != "" {
			c.LocalFlags().VisitAll(func(f *pflag.Flag) { owned[f.Name] = true })
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(cmd.Root())
	return owned
}

// Origin says where the value of cmd's flag name came from, for a message
// about it: "--addr" when given, else what Apply took it from, the
// environment variable or the file's key and line ("listen.addr (line 4
// of evfwd.yaml)"), else "the default".
func (c *Config) Origin(cmd *cobra.Command, name string) string {
	if f := cmd.Flags().Lookup(name); f != nil && f.Changed {
		return "--" + name
	}
	if c != nil && c.origins[name] != "" {
		return c.origins[name]
	}
	return "the default"
}

// keyOrigin names the file's key at (dotted) with its line when known.
func (c *Config) keyOrigin(at string) string {
	var path []any
	for part := range strings.SplitSeq(at, ".") {
		path = append(path, part)
	}
	if key, _ := c.node(path...); key != nil && key.Line > 0 {
		return fmt.Sprintf("%s (line %d of %s)", at, key.Line, c.File)
	}
	return fmt.Sprintf("%s (in %s)", at, c.File)
}

// CheckKeys refuses a file holding a key no command of cmd's tree reads,
// as Apply does first: for a file read again while a command runs.
func (c *Config) CheckKeys(cmd *cobra.Command) error {
	return unknownKeys(c.doc, knownKeys(cmd.Root()), c.File)
}

// noConfig lists flags the file never sets: they say where the file is or
// are resolved by their own rules (secrets).
var noConfig = map[string]bool{"help": true, "config": true, "secret": true, "secret-file": true}

// Apply fills every flag the user did not set from the environment (bound
// flags only) and then from the file, so that options structs bound to
// flags see the final value and commands never read viper themselves. A
// top-level key another command owns (OwnsTopLevel) is not cmd's.
//
// First it refuses a file holding a key that no command of the tree reads
// (see ReadsConfig): a typo would otherwise be ignored in silence.
func (c *Config) Apply(cmd *cobra.Command, getenv func(string) string) error {
	if err := unknownKeys(c.doc, knownKeys(cmd.Root()), c.File); err != nil {
		return err
	}
	owned := ownedElsewhere(cmd)
	c.origins = map[string]string{}
	var errs []error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Changed || noConfig[f.Name] {
			return
		}
		// from is where the value came from; name, how that place calls it.
		from, name, val, ok := "", "", "", false
		if env := f.Annotations[annotationEnv]; len(env) > 0 {
			if val = getenv(env[0]); val != "" {
				from, name, ok = env[0], env[0], true
				c.origins[f.Name] = env[0]
			}
		}
		if !ok {
			top := !owned[f.Name] || f.Annotations[annotationShares] != nil
			var at string
			if val, at, ok = c.lookup(cmd.Name(), f.Name, top); ok {
				from, name = "config "+c.File, "config "+c.File+": "+underscore(f.Name)
				c.origins[f.Name] = c.keyOrigin(at)
			}
		}
		if !ok {
			return
		}
		if err := checkURLValues(f, name, val); err != nil {
			errs = append(errs, err)
		} else if err := setFlag(f, val); err != nil {
			errs = append(errs, UsageErrorf("%s: invalid value %q for --%s: %v", from, val, f.Name, err))
		}
	})
	return errors.Join(errs...)
}

// checkURLValues is CheckURLScheme for a URL flag's value (a comma list
// for a slice flag) from the environment or the file, named as there.
func checkURLValues(f *pflag.Flag, name, val string) error {
	if f.Annotations[annotationURL] == nil {
		return nil
	}
	vals := []string{val}
	if _, ok := f.Value.(pflag.SliceValue); ok {
		vals = strings.Split(val, ",")
	}
	for _, v := range vals {
		if err := CheckURLScheme(name, v); err != nil {
			return err
		}
	}
	return nil
}

// setFlag sets f from one string; slice flags take a comma list.
func setFlag(f *pflag.Flag, val string) error {
	if sv, ok := f.Value.(pflag.SliceValue); ok {
		return sv.Replace(strings.Split(val, ","))
	}
	return f.Value.Set(val)
}
