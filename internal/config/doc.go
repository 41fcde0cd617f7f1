// Package config is Nomos's configuration: the defaults, the YAML file and
// the NOMOS_ environment variables read into one Config, and the checks
// each role runs on the part it uses. A key the config does not know, in a
// file or a variable, is an error that names it and the key it most likely
// meant.
package config
