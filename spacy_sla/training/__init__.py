"""What training configs name besides the model: scorers (`@scorers`),
corpus readers (`@readers`) and loggers (`@loggers`)."""
