"""What trains, on either side: the one training loop and optimizer step, minibatches and seeds, the local losses,
Alice's task, the batched fit of several organizations at once, privacy mechanisms, the split network, memory."""
