"""GitLab merge requests (CONTRACT section 17): URLs, the REST v4 client, checkout, publishing."""
