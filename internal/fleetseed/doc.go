// Package fleetseed reads a seed directory: the YAML that describes a
// fleet (hosts, containers, VMs, services and how they depend on each
// other), its checks, policy overrides, knowledge and runbooks. Load
// validates it whole, each problem naming its file and line; the store
// applies what it returns.
package fleetseed
