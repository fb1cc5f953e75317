/** A well-formed ed25519 host key line for configs whose hosts are never dialled. */
export const EXAMPLE_HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAII1GI7+3R49Q9T3kRWVrxat8JwYNEnkkdZU3QYoOokEG";
