"""Engine layer: clients, provisioning, errors."""
