"""The HTTPS client of deliveries: one hardened POST, its dialing (address rules, deadline, TLS), kept connections."""
