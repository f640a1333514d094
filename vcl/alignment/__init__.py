"""Row alignment: the private set intersection of the organizations' row IDs (ECDH over X25519)."""
