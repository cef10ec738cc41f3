package cli

import (
	"os"
	"time"
)

// Factory is what every command is built from: streams, settings and the
// few process facts that tests replace.
type Factory struct {
	IO      *IOStreams
	Config  *Config
	Getenv  func(string) string
	Now     func() time.Time
	Version string // evfwd's version, for User-Agent headers and `version`
	// LocalConfig, then DefaultConfig, is the config file read when
	// neither --config nor EVFWD_CONFIG names one (the first that exists;
	// see FindConfig); "" skips it.
	LocalConfig   string
	DefaultConfig string

	// Format is the root --output value, set before any command runs.
	Format Format
}

// NewFactory returns the factory for a real process.
func NewFactory(version string) *Factory {
	empty, _ := LoadConfig("", false)
	return &Factory{
		IO:      System(),
		Config:  empty,
		Getenv:  os.Getenv,
		Now:     time.Now,
		Version: version,
		Format:  FormatText,

		LocalConfig:   LocalConfigFile,
		DefaultConfig: DefaultConfigFile(),
	}
}

// TestFactory returns a factory on buffers with an empty environment.
func TestFactory() (*Factory, *IOStreams) {
	io, _, _, _ := Test()
	f := NewFactory("0.0.0-test")
	f.IO = io
	f.LocalConfig, f.DefaultConfig = "", ""
	f.Getenv = func(string) string { return "" }
	return f, io
}
