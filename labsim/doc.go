// Package labsim is a simulated Proxmox host served over real SSH. It keeps
// container state, emulates the pct and in-container commands the actuator
// uses, injects faults on request, and logs every command it receives.
package labsim
