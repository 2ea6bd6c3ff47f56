"""What researchers ask for and see: workspace requests, images, lifecycle actions, their pages and API."""
