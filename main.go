// Command evfwd collects analytics events and forwards them to signed
// webhooks; see README.md.
package main

import (
	"os"

	"github.com/evfwd/evfwd/cmd"
	"github.com/evfwd/evfwd/internal/version"
)

func main() {
	os.Exit(cmd.Execute(version.Version()))
}
