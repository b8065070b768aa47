"""The team lead: deterministic scheduler that moves models through the gated stages."""
