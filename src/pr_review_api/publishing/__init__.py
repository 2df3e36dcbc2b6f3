"""What every forge's publishing shares: the markers, placement, the body's layout, the driver."""
