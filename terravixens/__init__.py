"""terravixens: Talos Linux Kubernetes on Proxmox VE with cdktf, safe over the node lifecycle."""
